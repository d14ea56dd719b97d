//! `Accept` negotiation: plain JSON, `Table` (`as=Table;g=meta.k8s.io;v=v1|v1beta1`) or
//! `PartialObjectMetadata[List]` (`as=PartialObjectMetadata...;g=meta.k8s.io;v=v1`).
//! Protobuf is not offered: clients that also accept JSON get JSON.

use crate::api_error::ApiError;

/// The response representation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Objects as JSON.
    Json,
    /// `meta.k8s.io/v1` (or `v1beta1`) Table.
    Table {
        /// Whether the Table is `v1beta1`.
        beta: bool,
    },
    /// `meta.k8s.io/v1` PartialObjectMetadata.
    Meta,
}

/// Picks the first supported media range of an `Accept` header (`406` when none).
pub fn negotiate(accept: Option<&str>) -> Result<Output, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Output::Json);
    };
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let mut as_ = None;
        let mut g = None;
        let mut v = None;
        for p in parts {
            match p.split_once('=') {
                Some(("as", x)) => as_ = Some(x),
                Some(("g", x)) => g = Some(x),
                Some(("v", x)) => v = Some(x),
                _ => {}
            }
        }
        if !matches!(
            media,
            "application/json" | "*/*" | "application/*" | "application/yaml"
        ) {
            continue;
        }
        match (as_, g, v) {
            (None, _, _) => return Ok(Output::Json),
            (Some("Table"), Some("meta.k8s.io"), Some("v1")) => {
                return Ok(Output::Table { beta: false });
            }
            (Some("Table"), Some("meta.k8s.io"), Some("v1beta1")) => {
                return Ok(Output::Table { beta: true });
            }
            (
                Some("PartialObjectMetadata" | "PartialObjectMetadataList"),
                Some("meta.k8s.io"),
                Some("v1"),
            ) => {
                return Ok(Output::Meta);
            }
            _ => continue,
        }
    }
    Err(ApiError::not_acceptable(accept))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_and_kube_rs_accept_headers() {
        assert_eq!(
            negotiate(Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")).expect("ok"),
            Output::Table { beta: false }
        );
        assert_eq!(
            negotiate(Some(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            ))
            .expect("ok"),
            Output::Meta
        );
        assert_eq!(
            negotiate(Some(
                "application/vnd.kubernetes.protobuf, application/json"
            ))
            .expect("ok"),
            Output::Json
        );
        assert_eq!(negotiate(None).expect("ok"), Output::Json);
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf"))
                .expect_err("406")
                .code,
            406
        );
    }
}
