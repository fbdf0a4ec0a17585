"""Apple's App Store Server Library (Python) verifying the same signed notifications as
appstore-reconcile, for `reconcile-benchmark`. Offline (enable_online_checks=False), so that the
chain is checked at each payload's signedDate, with the same root certificate.

    python apple_library_benchmark.py INPUT.json SECONDS

INPUT.json: {"root": base64 DER, "bundleId", "appAppleId", "environment": "Production"|"Sandbox",
"notifications": [JWS, ...]}. Prints one JSON object: full notifications (the notification and its
nested signed transaction and renewal info, three verifications) and single payloads (a signed
transaction alone) per CPU-second of this process.
"""
import base64
import json
import sys
import time

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier


def rate(seconds, body):
    body()  # warm up
    start_cpu = time.process_time()
    start = time.monotonic()
    operations = 0
    while time.monotonic() - start < seconds:
        operations += body()
    return operations / (time.process_time() - start_cpu)


def main():
    with open(sys.argv[1]) as handle:
        data = json.load(handle)
    seconds = float(sys.argv[2])
    environment = Environment.PRODUCTION if data["environment"] == "Production" else Environment.SANDBOX
    verifier = SignedDataVerifier([base64.b64decode(data["root"])], False, environment, data["bundleId"], data.get("appAppleId"))
    notifications = data["notifications"]
    decoded = [verifier.verify_and_decode_notification(jws) for jws in notifications]
    transactions = [d.data.signedTransactionInfo for d in decoded]

    def full():
        for jws in notifications:
            notification = verifier.verify_and_decode_notification(jws)
            verifier.verify_and_decode_signed_transaction(notification.data.signedTransactionInfo)
            verifier.verify_and_decode_renewal_info(notification.data.signedRenewalInfo)
        return len(notifications)

    def single():
        for jws in transactions:
            verifier.verify_and_decode_signed_transaction(jws)
        return len(transactions)

    print(json.dumps({"fullPerCPUSecond": rate(seconds, full), "singlePerCPUSecond": rate(seconds, single)}))


if __name__ == "__main__":
    main()
