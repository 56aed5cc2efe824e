"""Starts two training processes, one per rank (RANK_ID=0/1), and waits for them; the parent
itself never imports TensorFlow."""
import os
import subprocess
import sys
from pathlib import Path

child = Path(__file__).with_name("keras_fit.py")
procs = [subprocess.Popen([sys.executable, str(child)], env={**os.environ, "RANK_ID": str(r)},
                          stdout=subprocess.DEVNULL) for r in (0, 1)]
sys.exit(max(p.wait() for p in procs))
