#!/usr/bin/env python3
"""Peer benchmark for `verify-worker bench receipts`: the same inputs through two PyPI libraries, one thread.

  app-store-server-library (Apple's):  ReceiptUtility transaction-id extraction for app and iOS 6 receipts
                                        (verifies nothing), SignedDataVerifier for JWS (enable_online_checks=False).
  apple-purchase-receipt-verifier:      Verifier.verify_receipt / verify_signed_data (full local verification).

Usage: peers.py --seconds 2 --case NAME=PATH [--case NAME=PATH ...]
Case names containing "ios6" are iOS 6 receipts, "jws" JWS (with "cold" a fresh verifier per call), anything
else an app receipt. Prints {"peer": {"case": receipts_per_second}}; a peer that rejects an input is left out
for that case and named under "_notes" on stderr. Install the peers with scripts/bench/install-peers.sh.
"""

import argparse
import json
import os
import sys
import time


def measure(function, seconds):
    function()  # warm up, and fail early
    count = 0
    start = time.perf_counter()
    elapsed = 0.0
    while elapsed < seconds:
        for _ in range(8):
            function()
        count += 8
        elapsed = time.perf_counter() - start
    return count / elapsed


def apple_library_cases(cases, seconds, notes):
    from appstoreserverlibrary.models.Environment import Environment
    from appstoreserverlibrary.receipt_utility import ReceiptUtility
    from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier

    here = os.path.dirname(os.path.abspath(__file__))
    roots_dir = os.path.join(here, "..", "..", "Sources", "Receipts", "TrustAnchors")
    roots = [open(os.path.join(roots_dir, name), "rb").read() for name in ("AppleRootCA-G3.cer", "AppleIncRootCA.cer")]
    utility = ReceiptUtility()
    rates = {}
    for name, text in cases:
        if "jws" in name:
            def make():
                # bundle id is not checked for renewal info; environment must match the payload.
                return SignedDataVerifier(roots, False, Environment.SANDBOX, "unused.bundle.id")

            warm = make()

            def run(cold="cold" in name):
                verifier = make() if cold else warm
                decoded = verifier.verify_and_decode_renewal_info(text)
                if decoded is None:
                    raise RuntimeError("no payload")
        elif "ios6" in name:
            def run():
                if utility.extract_transaction_id_from_transaction_receipt(text) is None:
                    raise RuntimeError("no transaction id")
        else:
            def run():
                utility.extract_transaction_id_from_app_receipt(text)
        try:
            rates[name] = measure(run, seconds)
        except Exception as error:  # a peer that cannot handle a case is reported, not fatal
            notes.append(f"app-store-server-library {name}: {type(error).__name__}: {error}")
    return rates


def aprv_cases(cases, seconds, notes):
    from apple_purchase_receipt_verifier import Config, Verifier

    verifier = Verifier(Config())
    rates = {}
    for name, text in cases:
        if "jws" in name:
            def call(fresh="cold" in name):
                # The verifier has no public chain cache switch; "cold" builds a new one per call.
                (Verifier(Config()) if fresh else verifier).verify_signed_data(text)
            check = verifier.verify_signed_data(text)
            run = call
        else:
            check = verifier.verify_receipt(text)

            def run():
                verifier.verify_receipt(text)
        if check.failure is not None:
            notes.append(f"apple-purchase-receipt-verifier {name}: rejected ({check.failure.reason})")
            continue
        rates[name] = measure(run, seconds)
    return rates


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--case", action="append", default=[])
    arguments = parser.parse_args()
    cases = []
    for item in arguments.case:
        name, path = item.split("=", 1)
        with open(path, "r") as handle:
            cases.append((name, handle.read().strip()))
    notes = []
    output = {
        "app-store-server-library": apple_library_cases(cases, arguments.seconds, notes),
        "apple-purchase-receipt-verifier": aprv_cases(cases, arguments.seconds, notes),
    }
    for note in notes:
        print(note, file=sys.stderr)
    print(json.dumps(output))


if __name__ == "__main__":
    main()
