"""Maps the top-level folders to their import names.

The folder ``operator/`` cannot be imported as ``operator``: the standard library owns that
name and imports it at interpreter start. Each folder is therefore installed under a
``distgnn_*`` name, with every sub-package found below it.
"""

from setuptools import find_packages, setup

PACKAGE_DIRS = {
    "distgnn_api": "api",
    "distgnn_operator": "operator",
    "distgnn_workload": "workload",
}

packages = []
for name, folder in PACKAGE_DIRS.items():
    packages.append(name)
    packages.extend(f"{name}.{sub}" for sub in find_packages(folder))

setup(packages=packages, package_dir=PACKAGE_DIRS)
