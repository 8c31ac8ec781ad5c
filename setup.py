# `pip install .` from the repository root: the same package as `pip install ./python`
# (python/setup.py, docs/install.md).
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
exec(compile(open(os.path.join(sys.path[0], "setup.py")).read(), os.path.abspath(__file__), "exec"))
