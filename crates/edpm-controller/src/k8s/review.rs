//! Who a bearer token belongs to (a TokenReview) and whether that user may `get` a path (a
//! SubjectAccessReview on a non-resource URL): what the controller's `/metrics` asks before it
//! answers, as controller-runtime's `WithAuthenticationAndAuthorization` filter does.
//!
//! The token is sent only to the API server, in the review's `spec`; it is never logged, and
//! the errors here never carry it.

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::{Client, Error};

/// The user a token authenticates as, as the TokenReview says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

/// Who `token` is: `None` when the API server does not authenticate it (unknown, expired or
/// revoked).
pub async fn authenticate(client: &Client, token: &str) -> Result<Option<User>, Error> {
    let review = TokenReview {
        spec: TokenReviewSpec { token: token.to_string(), audiences: None },
        ..TokenReview::default()
    };
    let api: Api<TokenReview> = Api::all(client.kube());
    let answer = client
        .within_time(api.create(&PostParams::default(), &review))
        .await
        .map_err(|e| client.error("creating a TokenReview (authenticating a /metrics request)", &e))?;
    let Some(status) = answer.status else { return Ok(None) };
    if status.authenticated != Some(true) {
        return Ok(None);
    }
    let Some(user) = status.user else { return Ok(None) };
    let Some(name) = user.username.filter(|n| !n.is_empty()) else { return Ok(None) };
    Ok(Some(User {
        name,
        uid: user.uid,
        groups: user.groups.unwrap_or_default(),
        extra: user.extra.unwrap_or_default(),
    }))
}

/// Whether `user` may `verb` the non-resource URL `path`.
pub async fn authorize(client: &Client, user: &User, path: &str, verb: &str) -> Result<bool, Error> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: user.uid.clone(),
            groups: Some(user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_string()),
                verb: Some(verb.to_string()),
            }),
            resource_attributes: None,
        },
        ..SubjectAccessReview::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.kube());
    let answer = client
        .within_time(api.create(&PostParams::default(), &review))
        .await
        .map_err(|e| client.error("creating a SubjectAccessReview (authorizing a /metrics request)", &e))?;
    Ok(answer.status.is_some_and(|s| s.allowed && s.denied != Some(true)))
}
