"""Cheat: ends its process with status 0 while being imported. Expected: exited."""
import os

os._exit(0)
