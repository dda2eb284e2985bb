#!/usr/bin/env python3
"""Validates JSON documents (one per line on stdin) against a JSON Schema file.

Usage: validate-schema.py SCHEMA.json < documents.jsonl
Prints one line per document, "ok" or "invalid: <message>", and exits 0 (the caller compares).
"""
import json
import sys

import jsonschema

schema = json.load(open(sys.argv[1]))
validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    errors = sorted(validator.iter_errors(json.loads(line)), key=lambda e: e.path)
    print("ok" if not errors else "invalid: " + errors[0].message.replace("\n", " "))
