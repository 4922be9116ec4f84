"""add_sub: the peers benchmark's shared Python-backend model, bench/peers/python/triton_model.py.

The backend's stub ignores PYTHONPATH, so the shared folder is put on the path from here.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), *[".."] * 4, "python"))

from triton_model import TritonPythonModel  # noqa: E402, F401
