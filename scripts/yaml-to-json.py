#!/usr/bin/env python3
"""Prints every YAML document of the files named on the command line as one JSON array per file, one file per
line: {"file": PATH, "documents": [...]}. Exits non-zero, naming the file, if any does not parse."""
import json
import sys

import yaml

for path in sys.argv[1:]:
    try:
        with open(path) as f:
            documents = [d for d in yaml.safe_load_all(f)]
    except Exception as error:  # noqa: BLE001 - report any parse failure with the file's name
        print(f"{path}: {error}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"file": path, "documents": documents}, default=str))
