"""The subpackages of `llmctl`, found by setuptools; everything else is in pyproject.toml.

pyproject.toml maps the folders the repository is organised by into the one import package
(`[tool.setuptools] package-dir`: core/ is `llmctl`, cli/ is `llmctl.cli`, ...). Its `packages.find`
names what it finds relative to the folder it searched, without that prefix, so this file runs
setuptools' own `find_namespace_packages` in each mapped folder and puts the folder's package name in
front. Namespace packages, so that the folders holding only data (blueprints/catalog, blueprints/data,
serving/locks, serving/ui) are packages too: their files are package data (pyproject.toml's
`package-data`), and setuptools neither warns that the folder "would be ignored" nor, in a later
release, leaves its files out. A new subpackage or data folder needs no edit here or in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup
from setuptools.config.pyprojecttoml import read_configuration


def packages(package_dir: dict[str, str]) -> list[str]:
    """Every package and data folder under the mapped folders, named as it is imported (bytecode
    caches left out)."""
    found = set(package_dir)
    for package, folder in package_dir.items():
        subs = find_namespace_packages(folder, exclude=["__pycache__", "*.__pycache__"])
        found.update(f"{package}.{sub}" for sub in subs)
    return sorted(found)


if __name__ == "__main__":
    config = read_configuration("pyproject.toml", expand=False)
    setup(packages=packages(config["tool"]["setuptools"]["package-dir"]))
