"""kprobe.paths: the class-data archives' names follow the jars they were written from."""

from __future__ import annotations

import os

from kprobe import paths


def test_a_reinstalled_jar_names_a_new_archive_of_the_same_family(tmp_path, monkeypatch):
    """The JVM refuses an archive once a jar's time changed (a new venv, the same PySpark in the same place):
    the archive must then be a new one, written again, and not the old one, refused silently from then on."""
    monkeypatch.setenv("KPROBE_CACHE_DIR", str(tmp_path / "cache"))
    jar = tmp_path / "spark-core.jar"
    jar.write_bytes(b"PK")
    before = paths.class_archive("aggregate", "driver", "java", "4.0", files=[str(jar)])
    assert paths.class_archive("aggregate", "driver", "java", "4.0", files=[str(jar)]) == before
    os.utime(jar, ns=(1, 1))  # reinstalled: the same bytes, another time
    after = paths.class_archive("aggregate", "driver", "java", "4.0", files=[str(jar)])
    assert after != before and after.stem.rpartition("-")[0] == before.stem.rpartition("-")[0]
    assert paths.class_archive("aggregate", "driver", "java", "4.1", files=[str(jar)]).stem.rpartition("-")[0] != (
        after.stem.rpartition("-")[0])  # another Spark: another family
    assert paths.class_archive("lab", "broker", "java", "cp") == paths.class_archive("lab", "broker", "java", "cp")


def test_an_archive_in_place_removes_only_those_it_replaces(tmp_path, monkeypatch):
    monkeypatch.setenv("KPROBE_CACHE_DIR", str(tmp_path / "cache"))
    jar = tmp_path / "kafka.jar"
    jar.write_bytes(b"PK")
    old = paths.class_archive("lab", "broker", "java", "cp", files=[str(jar)])
    other_family = paths.class_archive("lab", "broker", "java", "another cp", files=[str(jar)])
    unkeyed = paths.class_archive("lab", "classes", "java", "cp")
    jarless = paths.class_archive("lab", "broker", "java", "cp")  # the same family, no jars in its name
    os.utime(jar, ns=(1, 1))
    new = paths.class_archive("lab", "broker", "java", "cp", files=[str(jar)])
    old.parent.mkdir(parents=True)
    for archive in (old, other_family, unkeyed, jarless):
        archive.write_bytes(b"archive")
    writing = old.with_name(f".{new.name}.{os.getpid() + 1}")  # another process's archive on its way
    writing.write_bytes(b"half")
    written = old.with_name(f".{new.name}.{os.getpid()}")  # this process's, whole
    written.write_bytes(b"archive")
    paths.put_archive(written, new)
    assert new.read_bytes() == b"archive" and not written.exists()
    assert sorted(p.name for p in old.parent.iterdir()) == sorted(
        p.name for p in (other_family, unkeyed, new, writing))
    paths.drop_superseded(unkeyed)  # no jars in its key: nothing it could replace
    assert unkeyed.exists() and other_family.exists()
