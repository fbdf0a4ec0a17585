"""A minimal App Store Server Notifications V2 receiver built on Apple's App Store Server
Library for Python, for reconcile-benchmark's comparison with `appstore-reconcile serve`: the
notification and its nested signed transaction and renewal info verified by SignedDataVerifier
(offline, as `serve` does by default), one INSERT through psycopg (autocommit: committed before
the answer), 200. Run by gunicorn with one sync worker per core:

    RECEIVER_ROOT=root.der RECEIVER_BUNDLE_ID=… RECEIVER_APP_APPLE_ID=… RECEIVER_DSN=… \
        gunicorn -w 2 -b 127.0.0.1:PORT apple_library_receiver:application
"""
import json
import os

import psycopg
from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException

with open(os.environ["RECEIVER_ROOT"], "rb") as handle:
    ROOT = handle.read()
verifier = SignedDataVerifier(
    [ROOT], False, Environment.PRODUCTION, os.environ["RECEIVER_BUNDLE_ID"], int(os.environ["RECEIVER_APP_APPLE_ID"])
)
INSERT = (
    "INSERT INTO apple_library_receiver.notifications"
    " (notification_uuid, notification_type, signed_date, original_transaction_id, expires_date, auto_renew_status)"
    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (notification_uuid) DO NOTHING"
)
_connection = None


def connection():
    """One connection per worker process, opened on its first request."""
    global _connection
    if _connection is None or _connection.closed:
        _connection = psycopg.connect(os.environ["RECEIVER_DSN"], autocommit=True)
    return _connection


def answer(start_response, status, text):
    body = text.encode()
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def application(environ, start_response):
    if environ["REQUEST_METHOD"] != "POST":
        return answer(start_response, "405 Method Not Allowed", "POST only\n")
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if length > 256 * 1024:
        return answer(start_response, "400 Bad Request", "too large\n")
    try:
        signed = json.loads(environ["wsgi.input"].read(length))["signedPayload"]
        notification = verifier.verify_and_decode_notification(signed)
        transaction = verifier.verify_and_decode_signed_transaction(notification.data.signedTransactionInfo)
        renewal = verifier.verify_and_decode_renewal_info(notification.data.signedRenewalInfo)
    except (ValueError, KeyError, TypeError, VerificationException):
        return answer(start_response, "400 Bad Request", "rejected\n")
    try:
        connection().execute(
            INSERT,
            (
                notification.notificationUUID,
                notification.rawNotificationType,
                notification.signedDate,
                transaction.originalTransactionId,
                transaction.expiresDate,
                renewal.rawAutoRenewStatus,
            ),
        )
    except psycopg.Error:
        return answer(start_response, "503 Service Unavailable", "retry later\n")
    return answer(start_response, "200 OK", "recorded\n")
