"""Sample fleet files (YAML), packaged as data; nothing here is code."""
