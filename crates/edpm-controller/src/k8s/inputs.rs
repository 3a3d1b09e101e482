//! The Secrets and ConfigMaps of the data plane's namespace, watched metadata-only (kube's
//! `PartialObjectMeta`: the API server sends `metadata` alone, never `data`), for
//! `crate::inputs` to see a delivered one rotate the instant it does. Only names and
//! `resourceVersion`s come out of here.

use futures::StreamExt;
use futures::stream::LocalBoxStream;
use k8s_openapi::Resource as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};

use super::Client;

/// The watcher's event as `crate::inputs` takes it in: kube's own, named here so that only
/// the k8s module names kube.
pub use kube::runtime::watcher::Event;

/// An object's name and `resourceVersion`.
pub type Version = (String, Option<String>);

/// What one of the two watches reports: its kind (`Secret`, `ConfigMap`) and a watcher event
/// of names and versions, or the error the watcher backs off from.
pub type Seen = (&'static str, Result<watcher::Event<Version>, (Option<u16>, String)>);

/// Whether the controller may list Secrets and ConfigMaps here: `Some(why not)` when the API
/// server refuses (403) a one-item metadata list of either; any other answer is left to the
/// watch's backoff.
pub async fn refused(client: &Client) -> Option<String> {
    let ns = client.namespace().to_string();
    let probe = ListParams::default().limit(1);
    let secrets: Api<PartialObjectMeta<Secret>> = Api::namespaced(client.kube(), &ns);
    let config_maps: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client.kube(), &ns);
    for (kind, got) in [
        (Secret::URL_PATH_SEGMENT, client.within_time(secrets.list(&probe)).await.map(|_| ())),
        (ConfigMap::URL_PATH_SEGMENT, client.within_time(config_maps.list(&probe)).await.map(|_| ())),
    ] {
        if let Err(kube::Error::Api(s)) = got
            && s.code == 403
        {
            return Some(format!("listing {kind} in namespace {ns} is forbidden: {}", s.message));
        }
    }
    None
}

/// Both watches, merged: list then watch from the list's version with bookmarks, resumed or
/// listed again by kube's watcher after a break (its default backoff between errors).
pub fn watch(client: &Client) -> LocalBoxStream<'static, Seen> {
    let ns = client.namespace().to_string();
    let secrets: Api<PartialObjectMeta<Secret>> = Api::namespaced(client.kube(), &ns);
    let config_maps: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client.kube(), &ns);
    let secrets =
        watcher(secrets, watcher::Config::default()).default_backoff().map(|e| ("Secret", versions(e)));
    let config_maps = watcher(config_maps, watcher::Config::default())
        .default_backoff()
        .map(|e| ("ConfigMap", versions(e)));
    futures::stream::select(secrets, config_maps).boxed_local()
}

fn versions<K>(
    e: Result<watcher::Event<PartialObjectMeta<K>>, watcher::Error>,
) -> Result<watcher::Event<Version>, (Option<u16>, String)> {
    let v = |o: PartialObjectMeta<K>| (o.metadata.name.unwrap_or_default(), o.metadata.resource_version);
    match e {
        Ok(ev) => Ok(match ev {
            watcher::Event::Init => watcher::Event::Init,
            watcher::Event::InitApply(o) => watcher::Event::InitApply(v(o)),
            watcher::Event::InitDone => watcher::Event::InitDone,
            watcher::Event::Apply(o) => watcher::Event::Apply(v(o)),
            watcher::Event::Delete(o) => watcher::Event::Delete(v(o)),
        }),
        Err(e) => Err((super::code(&e), e.to_string())),
    }
}
