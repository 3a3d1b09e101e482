//! Logins for tests (this crate's, and others' with the `testing` feature): never built by
//! the programs.

use super::{Login, LoginFrom};

/// A cell's service user's login to a Keystone at `http://ks`.
pub fn login(user: &str, password: &str, cell: &str) -> Login {
    Login {
        auth_url: "http://ks".into(),
        region: "regionOne".into(),
        user: user.into(),
        domain: "Default".into(),
        project: "service".into(),
        password: Some(password.into()),
        application_credential: None,
        ca_bundle: None,
        ca_secret: None,
        secret: format!("{cell}-secret"),
        cells: vec![cell.into()],
        from: LoginFrom::Cell,
    }
}
