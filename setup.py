"""What pyproject.toml's tables cannot say: the presets of configs/ ship inside the package, as electra/configs/
(where `electra.config.cli.project_dir` finds them once installed), beside the packages of electra/; and the drivers
pretrain.py and finetune.py, which the repository holds once, at its root (the notebooks' export), are copied by the
build into the package as electra/jobs/pretrain.py and electra/jobs/finetune.py, where the console commands run them
(`electra.jobs.commands`). An editable install (`pip install -e .`) has no copies: its commands run the root ones."""
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

DRIVERS = ('pretrain.py', 'finetune.py')


class BuildWithDrivers(build_py):
    "setuptools' build_py, then the drivers copied into the built electra/jobs/ (the wheel's)."

    def run(self):
        super().run()
        if self.editable_mode: return  # the package is the checkout: its commands find the drivers at its root
        for name in DRIVERS:
            self.copy_file(str(Path(__file__).resolve().parent / name), str(Path(self.build_lib) / 'electra' / 'jobs' / name))


setup(packages=[*find_packages(include=['electra', 'electra.*']), 'electra.configs'],
      package_dir={'electra.configs': 'configs'}, package_data={'electra.configs': ['*/*.yaml']},
      cmdclass={'build_py': BuildWithDrivers})
