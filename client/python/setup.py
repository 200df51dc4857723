"""Fallback for pip/setuptools too old for PEP 621 metadata in pyproject.toml."""
from setuptools import setup

setup(name="baton", version="0.1.0", packages=["baton"], python_requires=">=3.8")
