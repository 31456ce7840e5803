/*
 * http/test/tlsgen.h — certificates for the TLS tests, made with libcrypto
 * (no openssl binary needed): a CA, and a server certificate it signed for
 * "localhost" and 127.0.0.1 (both names in subjectAltName, as clients check
 * them), valid from an hour ago for a day, with the extensions strict
 * verifiers ask for (Python 3.13's VERIFY_X509_STRICT: key identifiers, key
 * usage, basic constraints).
 */
#ifndef LITH_HTTP_TEST_TLSGEN_H
#define LITH_HTTP_TEST_TLSGEN_H

/* Write into the existing directory `dir`: ca.pem (the CA's certificate,
 * what a client trusts), cert.pem (the server's certificate), key.pem (its
 * key, mode 0600) and other-key.pem (a key that is not the certificate's).
 * Returns 0, or -1 after a message on stderr. */
int tlsgen_write(const char *dir);

#endif
