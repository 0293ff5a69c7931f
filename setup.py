"""The subpackages of `llmctl`, found by setuptools; everything else is in pyproject.toml.

pyproject.toml maps the folders the repository is organised by into the one import package
(`[tool.setuptools] package-dir`: core/ is `llmctl`, cli/ is `llmctl.cli`, ...). Its `packages.find`
names what it finds relative to the folder it searched, without that prefix, so this file runs
setuptools' own `find_packages` in each mapped folder and puts the folder's package name in front.
A new subpackage needs no edit here or in pyproject.toml.
"""

from setuptools import find_packages, setup
from setuptools.config.pyprojecttoml import read_configuration


def packages(package_dir: dict[str, str]) -> list[str]:
    """Every package under the mapped folders, named as it is imported."""
    found = set(package_dir)
    for package, folder in package_dir.items():
        found.update(f"{package}.{sub}" for sub in find_packages(folder))
    return sorted(found)


if __name__ == "__main__":
    config = read_configuration("pyproject.toml", expand=False)
    setup(packages=packages(config["tool"]["setuptools"]["package-dir"]))
