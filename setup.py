# nbdev 2's setup.py, minus its `from pkg_resources import parse_version` line: current setuptools
# no longer ships pkg_resources. Every setting lives in settings.ini; edit it there, not here.
import shlex
from configparser import ConfigParser

import setuptools

config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

cfg_keys = 'version description keywords author author_email'.split()
expected = cfg_keys + 'lib_name user branch license status min_python audience language'.split()
for o in expected: assert o in cfg, f'missing expected setting: {o}'
setup_cfg = {o: cfg[o] for o in cfg_keys}

licenses = {'apache2': ('Apache Software License 2.0', 'OSI Approved :: Apache Software License')}
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable']
lic = licenses.get(cfg['license'].lower(), (cfg['license'], None))
requirements = shlex.split(cfg.get('requirements', ''))
dev_requirements = shlex.split(cfg.get('dev_requirements', ''))
gpu_requirements = shlex.split(cfg.get('gpu_requirements', ''))
lucene_requirements = shlex.split(cfg.get('lucene_requirements', ''))
cluster_requirements = shlex.split(cfg.get('cluster_requirements', ''))

setuptools.setup(
    name=cfg['lib_name'],
    license=lic[0],
    classifiers=[
        'Development Status :: ' + statuses[int(cfg['status']) - 1],
        'Intended Audience :: ' + cfg['audience'].title(),
        'Natural Language :: ' + cfg['language'].title(),
        'Programming Language :: Python :: 3.11',
    ] + (['License :: ' + lic[1]] if lic[1] else []),
    url=cfg['git_url'],
    packages=setuptools.find_packages(include=[cfg['lib_name'], cfg['lib_name'] + '.*']),
    include_package_data=True,
    install_requires=requirements,
    extras_require={'dev': dev_requirements, 'gpu': gpu_requirements, 'lucene': lucene_requirements, 'cluster': cluster_requirements},
    python_requires='>=' + cfg['min_python'],
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={
        'console_scripts': cfg.get('console_scripts', '').split(),
        'nbdev': [f'{cfg.get("lib_path")}={cfg.get("lib_path")}._modidx:d'],
    },
    **setup_cfg)
