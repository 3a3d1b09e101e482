//! CA bundles, checked before a client is built with them: a bundle that holds no
//! certificate, or a "certificate" that is not one, is named with where it came from (the
//! kubeconfig field, the Secret and key), instead of surfacing later as a TLS handshake
//! error ("received corrupt message") or a client that "cannot be built (builder error)".
//! No I/O: the caller reads the bundle.

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The certificates of a PEM bundle (`where_` names its source in the message), each checked
/// to be an X.509 certificate a trust store takes.
pub fn pem_bundle(pem: &[u8], where_: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let mut certs = Vec::new();
    for (i, c) in CertificateDer::pem_slice_iter(pem).enumerate() {
        let c = c.map_err(|e| format!("{where_}: block {} is not readable PEM ({e})", i + 1))?;
        certs.push(c.into_owned());
    }
    if certs.is_empty() {
        return Err(format!(
            "{where_} holds no PEM certificate (no -----BEGIN CERTIFICATE----- block); put the CA certificate(s) there in PEM"
        ));
    }
    check_der(certs.iter().map(|c| c.as_ref()), where_)?;
    Ok(certs)
}

/// Checks DER certificates (already taken out of their PEM): each must be one a trust store
/// takes.
pub fn check_der<'a>(certs: impl IntoIterator<Item = &'a [u8]>, where_: &str) -> Result<(), String> {
    let certs: Vec<&[u8]> = certs.into_iter().collect();
    if certs.is_empty() {
        return Err(format!(
            "{where_} holds no PEM certificate (no -----BEGIN CERTIFICATE----- block); put the CA certificate(s) there in PEM"
        ));
    }
    let total = certs.len();
    for (i, der) in certs.into_iter().enumerate() {
        let mut store = rustls::RootCertStore::empty();
        store.add(CertificateDer::from(der.to_vec())).map_err(|e| {
            format!(
                "{where_}: certificate {} of {total} is not an X.509 certificate ({e}); put the CA's PEM certificate there",
                i + 1
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_CA: &str = include_str!("../../../tests/fixtures/tls/ca.pem");

    #[test]
    fn a_real_bundle_is_taken_and_fakes_are_named() {
        assert_eq!(pem_bundle(TEST_CA.as_bytes(), "x").unwrap().len(), 1);
        // The examples' placeholder: a CERTIFICATE block whose content is not one.
        let fake = "-----BEGIN CERTIFICATE-----\nZmFrZSBDQSBidW5kbGUgZm9yIGV4YW1wbGVzIG9ubHk=\n-----END CERTIFICATE-----\n";
        let e = pem_bundle(fake.as_bytes(), "Secret combined-ca-bundle key tls-ca-bundle.pem").unwrap_err();
        assert!(
            e.starts_with(
                "Secret combined-ca-bundle key tls-ca-bundle.pem: certificate 1 of 1 is not an X.509"
            ),
            "{e}"
        );
        let e = pem_bundle(b"not pem at all", "kubeconfig k: certificate-authority-data").unwrap_err();
        assert!(e.contains("holds no PEM certificate"), "{e}");
        let e = check_der([b"garbage".as_slice()], "k").unwrap_err();
        assert!(e.contains("certificate 1 of 1"), "{e}");
    }
}
