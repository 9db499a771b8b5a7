"""JSON schemas for the cert-manager objects the ``cert-manager`` overlay uses (``cert-manager.io/v1``).

Written from the cert-manager API reference (Issuer/ClusterIssuer ``IssuerSpec``, ``CertificateSpec``);
only the fields PreemptGuard may use are allowed, so a typo fails like kubectl's strict validation.
"""

from __future__ import annotations

from typing import Any

from object_schema import resource

_DURATION = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(h|m|s|ms))+$"}

_ISSUER_REF: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "kind": {"enum": ["Issuer", "ClusterIssuer"]},
        "group": {"const": "cert-manager.io"},
    },
    "additionalProperties": False,
}

ISSUER = resource("cert-manager.io/v1", "Issuer", {
    "type": "object",
    # IssuerConfig is a one-of: exactly one issuer type.
    "oneOf": [{"required": ["selfSigned"]}, {"required": ["ca"]}],
    "properties": {
        "selfSigned": {
            "type": "object",
            "properties": {"crlDistributionPoints": {"type": "array", "items": {"type": "string"}}},
            "additionalProperties": False,
        },
        "ca": {
            "type": "object",
            "required": ["secretName"],
            "properties": {
                "secretName": {"type": "string", "minLength": 1},
                "crlDistributionPoints": {"type": "array", "items": {"type": "string"}},
                "ocspServers": {"type": "array", "items": {"type": "string"}},
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
})

CERTIFICATE = resource("cert-manager.io/v1", "Certificate", {
    "type": "object",
    "required": ["secretName", "issuerRef"],
    "properties": {
        "secretName": {"type": "string", "minLength": 1},
        "issuerRef": _ISSUER_REF,
        "commonName": {"type": "string", "maxLength": 64},
        "dnsNames": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "ipAddresses": {"type": "array", "items": {"type": "string"}},
        "isCA": {"type": "boolean"},
        "duration": _DURATION,
        "renewBefore": _DURATION,
        "usages": {
            "type": "array",
            "items": {"enum": [
                "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
                "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
                "server auth", "client auth", "code signing", "email protection", "s/mime",
                "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing",
                "microsoft sgc", "netscape sgc",
            ]},
        },
        "privateKey": {
            "type": "object",
            "properties": {
                "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                "size": {"type": "integer"},
                "encoding": {"enum": ["PKCS1", "PKCS8"]},
                "rotationPolicy": {"enum": ["Never", "Always"]},
            },
            "additionalProperties": False,
        },
        "secretTemplate": {
            "type": "object",
            "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
})

SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("cert-manager.io/v1", "Issuer"): ISSUER,
    ("cert-manager.io/v1", "Certificate"): CERTIFICATE,
}
