#!/usr/bin/env bash
# Writes throw-away certificates for the TLS tests into DIR (created if missing):
#   ca.pem ca.key              the test CA
#   server.pem server.key      signed by it, for 127.0.0.1, ::1 and localhost (serverAuth)
#   client.pem client.key      signed by it (clientAuth)
#   other_ca.pem               a second, unrelated CA
#   other_client.pem .key     signed by the other CA: the wrong certificate for the server
# P-256 keys (fast to make); valid for two days. Needs openssl.
set -euo pipefail
dir=${1:?usage: make_test_certs.sh DIR}
mkdir -p "$dir"
cd "$dir"

new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# make_ca NAME CN
make_ca() {
  new_key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
}

# make_leaf NAME CA CN EXTENSIONS
make_leaf() {
  new_key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$3"
  printf '%s\n' "$4" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -out "$1.pem" \
    -days 2 -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

make_ca ca "pkserve test CA"
make_ca other_ca "pkserve unrelated CA"
make_leaf server ca localhost "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost"
make_leaf client ca "pkserve test client" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
make_leaf other_client other_ca "pkserve unrelated client" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
rm -f ./*.srl
