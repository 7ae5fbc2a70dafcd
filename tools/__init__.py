"""Repository tools that are not part of the installed package (see tools/apidoc.py)."""
