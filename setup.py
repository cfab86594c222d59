"""What pyproject.toml's tables cannot say: the presets of configs/ ship inside the package, as electra/configs/
(where `electra.config.base.project_dir` finds them once installed), beside the packages of electra/."""
from setuptools import find_packages, setup

setup(packages=[*find_packages(include=['electra', 'electra.*']), 'electra.configs'],
      package_dir={'electra.configs': 'configs'}, package_data={'electra.configs': ['*/*.yaml']})
