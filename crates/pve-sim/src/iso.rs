//! Reading a cloud-init NoCloud seed ISO (ISO9660, volume label `cidata`,
//! files `user-data`, `meta-data`, optional `network-config` and
//! `vendor-data`), as the provider builds it with hadris-iso and uploads it.
//! Rock Ridge and Joliet names are honoured (hadris-iso's reader).

use std::io::Cursor;

use hadris_iso::sync::IsoImage;

/// Errors reading a seed ISO.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IsoError {
    /// Not a readable ISO9660 image.
    #[error("not an ISO9660 image: {0}")]
    NotIso(String),
    /// The volume label is not `cidata` (case-insensitive).
    #[error("volume label is '{0}', not 'cidata'")]
    NotCidata(String),
    /// A required file is missing.
    #[error("file '{0}' not found in the seed ISO")]
    MissingFile(String),
    /// A file could not be read or is not UTF-8.
    #[error("cannot read '{file}': {reason}")]
    Read {
        /// File name.
        file: String,
        /// What went wrong.
        reason: String,
    },
}

impl IsoError {
    /// Short, stable category.
    pub fn category(&self) -> &'static str {
        match self {
            IsoError::NotIso(_) => "not-iso",
            IsoError::NotCidata(_) => "not-cidata",
            IsoError::MissingFile(_) => "missing-file",
            IsoError::Read { .. } => "read",
        }
    }
}

/// The contents of a NoCloud seed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NoCloudSeed {
    /// Volume label as stored (trimmed).
    pub volume_label: String,
    /// `user-data` text.
    pub user_data: String,
    /// `meta-data` text.
    pub meta_data: String,
    /// `network-config` text, if present.
    pub network_config: Option<String>,
    /// `vendor-data` text, if present.
    pub vendor_data: Option<String>,
}

/// The volume identifier of the primary volume descriptor (sector 16, bytes 40..72).
fn volume_label(iso: &[u8]) -> Result<String, IsoError> {
    let pvd = 16 * 2048;
    let desc = iso
        .get(pvd..pvd + 72)
        .ok_or_else(|| IsoError::NotIso("image too small".into()))?;
    if desc[0] != 1 || &desc[1..6] != b"CD001" {
        return Err(IsoError::NotIso(
            "no primary volume descriptor at sector 16".into(),
        ));
    }
    Ok(String::from_utf8_lossy(&desc[40..72])
        .trim_end_matches([' ', '\0'])
        .to_string())
}

/// Reads `user-data`, `meta-data` and (if present) `network-config` and
/// `vendor-data` from a NoCloud seed ISO.
///
/// # Errors
/// [`IsoError::NotIso`] for anything that is not ISO9660,
/// [`IsoError::NotCidata`] for another volume label,
/// [`IsoError::MissingFile`] when `user-data` or `meta-data` is absent,
/// [`IsoError::Read`] when a file cannot be read or is not UTF-8.
pub fn read_nocloud(iso: &[u8]) -> Result<NoCloudSeed, IsoError> {
    let label = volume_label(iso)?;
    if !label.eq_ignore_ascii_case("cidata") {
        return Err(IsoError::NotCidata(label));
    }
    let image = IsoImage::open(Cursor::new(iso)).map_err(|e| IsoError::NotIso(e.to_string()))?;
    let read = |name: &str| -> Result<Option<String>, IsoError> {
        let entry = image.find_path(name).map_err(|e| IsoError::Read {
            file: name.into(),
            reason: e.to_string(),
        })?;
        let Some(entry) = entry else { return Ok(None) };
        let bytes = image.read_file(&entry).map_err(|e| IsoError::Read {
            file: name.into(),
            reason: e.to_string(),
        })?;
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|e| IsoError::Read {
                file: name.into(),
                reason: e.to_string(),
            })
    };
    let user_data = read("user-data")?.ok_or_else(|| IsoError::MissingFile("user-data".into()))?;
    let meta_data = read("meta-data")?.ok_or_else(|| IsoError::MissingFile("meta-data".into()))?;
    Ok(NoCloudSeed {
        volume_label: label,
        user_data,
        meta_data,
        network_config: read("network-config")?,
        vendor_data: read("vendor-data")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_not_iso() {
        assert_eq!(read_nocloud(b"hello").unwrap_err().category(), "not-iso");
        let mut v = vec![0u8; 40_000];
        v[32768] = 1;
        v[32769..32774].copy_from_slice(b"CD001");
        v[32808..32840].copy_from_slice(b"OTHER                           ");
        assert_eq!(
            read_nocloud(&v).unwrap_err(),
            IsoError::NotCidata("OTHER".into())
        );
    }
}
