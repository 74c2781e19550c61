"""Package layout for setuptools (metadata and package data are in pyproject.toml).

Every ``simengine.*`` package is found automatically (new subpackages need no edit here); the
top-level ``presets/`` folder stays where the studio and the checkout read it and is installed as
``simengine/_presets`` (``simengine.presets.PRESET_DIR`` prefers that folder when it exists).
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["simengine", "simengine.*"]), "simengine._presets"],
    package_dir={"simengine._presets": "presets"},
)
