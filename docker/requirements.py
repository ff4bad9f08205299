"""The requirements of pyproject.toml, with the extras named (comma-separated), one per line for `pip -r`.

The images install these in a layer of their own before kprobe's code is copied in, so a change to the
code rebuilds only the small layer that installs kprobe itself. Run where pyproject.toml is, on Python
3.11 or later (the images' Debian Python): tomllib is in its standard library.
"""

import sys

import tomllib  # the standard library's from 3.11; kprobe itself still runs on 3.10

with open("pyproject.toml", "rb") as handle:
    project = tomllib.load(handle)["project"]
known = project["optional-dependencies"]
extras = [name for name in (sys.argv[1] if len(sys.argv) > 1 else "").split(",") if name]
unknown = [name for name in extras if name not in known]
if unknown:
    sys.exit(f"no extra {', '.join(unknown)} in pyproject.toml: give one of {', '.join(known)}")
print("\n".join(project["dependencies"] + [dep for name in extras for dep in known[name]]))
