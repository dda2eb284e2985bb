#!/usr/bin/env python3
"""Checks receipts minted by the verify-worker Apple simulator with Apple's official Python library
(app-store-server-library): the transaction id extracted from a minted PKCS#7 app receipt, and a minted JWS
verified against the simulator's root certificate.

Usage:
  check_with_apple_library.py --app-receipt B64 --transaction-id ID \
      --jws JWS --root-der PATH --bundle-id ID --environment Sandbox|Production [--app-apple-id N]

Exit 0 and print "ok" on success; exit 1 with the reason otherwise; exit 3 when the library is missing
(install it with: pip install app-store-server-library).
"""
import argparse
import sys

try:
    from appstoreserverlibrary.models.Environment import Environment
    from appstoreserverlibrary.receipt_utility import ReceiptUtility
    from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier
except ImportError as error:  # pragma: no cover - reported to the Swift test
    print(f"app-store-server-library is not installed ({error}); run: pip install app-store-server-library")
    sys.exit(3)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--app-receipt", required=True)
    parser.add_argument("--transaction-id", required=True)
    parser.add_argument("--jws", required=True)
    parser.add_argument("--jws-transaction-id", required=True)
    parser.add_argument("--root-der", required=True)
    parser.add_argument("--bundle-id", required=True)
    parser.add_argument("--environment", required=True, choices=["Sandbox", "Production"])
    parser.add_argument("--app-apple-id", type=int, default=1234567890)
    args = parser.parse_args()

    extracted = ReceiptUtility().extract_transaction_id_from_app_receipt(args.app_receipt)
    if extracted != args.transaction_id:
        print(f"extract_transaction_id_from_app_receipt returned {extracted!r}, expected {args.transaction_id!r}")
        return 1

    with open(args.root_der, "rb") as handle:
        root = handle.read()
    environment = Environment.SANDBOX if args.environment == "Sandbox" else Environment.PRODUCTION
    verifier = SignedDataVerifier([root], False, environment, args.bundle_id, args.app_apple_id)
    decoded = verifier.verify_and_decode_signed_transaction(args.jws)
    if decoded.transactionId != args.jws_transaction_id:
        print(f"verified JWS has transactionId {decoded.transactionId!r}, expected {args.jws_transaction_id!r}")
        return 1
    if decoded.bundleId != args.bundle_id:
        print(f"verified JWS has bundleId {decoded.bundleId!r}")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
