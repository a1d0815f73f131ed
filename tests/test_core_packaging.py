"""Packaging metadata: description, license, classifiers, bounded arviz; citation files (thesis, package)."""

import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_metadata_is_complete_and_arviz_is_bounded():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert len(project["description"]) > 20 and project["readme"] == "README.md"
    assert project["license"] == {"text": "MIT"}
    cls = project["classifiers"]
    assert "License :: OSI Approved :: MIT License" in cls
    assert any(c.startswith("Programming Language :: Python :: 3.11") for c in cls)
    assert any(c.startswith("Topic :: Scientific/Engineering") for c in cls)
    reqs = {Requirement(r).name: Requirement(r) for r in project["dependencies"]}
    arviz = reqs["arviz"].specifier
    assert "0.23.4" in arviz and "1.0.0" not in arviz and "1.0.0rc1" not in arviz  # < 1 until 1.x works
    import arviz as az

    assert az.__version__ in arviz  # the installed one satisfies the bound


def test_citation_files_cite_the_thesis_and_the_package():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software" and cff["license"] == "MIT"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert cff["version"] == project["version"] and cff["authors"]
    (thesis,) = [r for r in cff["references"] if r["type"] == "thesis"]
    title = "Multi-Objective Reward and Preference Optimization: Theory and Algorithms"
    assert thesis["title"] == title and thesis["authors"][0]["family-names"] == "Agnihotri"
    bib = (ROOT / "CITATION.bib").read_text()
    assert "@phdthesis{" in bib and "@software{bayescrl" in bib and title in bib
    assert "doi" not in bib.lower() and "url" not in bib.lower()  # nothing unverifiable invented
    assert bib.count("{") == bib.count("}")
