#!/bin/sh
# Make the TLS certificates of the clients' https tests in DIR (created):
# ca.pem (a CA to trust), cert.pem and key.pem (a server certificate it
# signed for localhost and 127.0.0.1, valid for a day, with the extensions
# strict verifiers want: key identifiers, key usage, basic constraints).
# The C tests make the same with libcrypto (http/test/tlsgen.c); the
# clients' suites have no C, so they run this (openssl(1)).
#
#   test-certs.sh DIR
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
cat >leaf.ext <<'X'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1
X
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj "/CN=lith test CA" -keyout ca.key -out ca.pem \
  -addext "basicConstraints = critical, CA:TRUE" -addext "keyUsage = critical, keyCertSign, cRLSign" 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
  -keyout key.pem -out leaf.csr 2>/dev/null
openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile leaf.ext \
  -out cert.pem 2>/dev/null
chmod 600 key.pem ca.key
rm -f leaf.csr leaf.ext ca.srl
