//! The NoCloud seed as an ISO9660 image, built in Rust with hadris-iso:
//! volume label `cidata` (kept lower-case: `strict_charset: false`), Rock
//! Ridge and Joliet names (`CreationFeatures::extensions()`) so the guest sees
//! `user-data`, `meta-data` and `network-config` exactly (checked with
//! `isoinfo`, `xorriso` and `blkid` when the dependency was chosen), plus
//! `vendor-data` for Ignition seeds.
//!
//! Proxmox cannot upload cloud-init snippets through the API, so the provider
//! uploads this image as `iso` content and attaches it as a CD-ROM
//! (docs/proxmox-semantics.md §13).

use std::io::Cursor;
use std::sync::Arc;

use hadris_iso::read::PathSeparator;
use hadris_iso::write::options::{CreationFeatures, IsoFormatOptions};
use hadris_iso::write::{File as IsoFile, InputFiles, IsoImageWriter};

use super::render::Seed;

/// The volume label cloud-init's NoCloud datasource looks for.
pub const VOLUME_LABEL: &str = "cidata";

/// Building the image failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the cloud-init ISO: {0}")]
pub struct IsoError(String);

/// The seed as an ISO image (bytes).
///
/// # Errors
/// [`IsoError`] if hadris-iso refuses the input (it should not for three
/// small files).
pub fn build(seed: &Seed) -> Result<Vec<u8>, IsoError> {
    let file = |name: &str, contents: Vec<u8>| IsoFile::File {
        name: Arc::new(name.to_string()),
        contents,
    };
    let mut files = vec![
        file("user-data", seed.user_data.clone()),
        file("meta-data", seed.meta_data.clone().into_bytes()),
        file("network-config", seed.network_config.clone().into_bytes()),
    ];
    if let Some(v) = &seed.vendor_data {
        files.push(file("vendor-data", v.clone().into_bytes()));
    }
    let files = InputFiles {
        path_separator: PathSeparator::ForwardSlash,
        files,
    };
    let options = IsoFormatOptions {
        volume_name: VOLUME_LABEL.to_string(),
        system_id: None,
        volume_set_id: None,
        publisher_id: None,
        preparer_id: None,
        application_id: Some("capmox".to_string()),
        sector_size: 2048,
        path_separator: PathSeparator::ForwardSlash,
        features: CreationFeatures::extensions(),
        strict_charset: false,
    };
    let out = IsoImageWriter::create(Cursor::new(Vec::new()), files, options)
        .map_err(|e| IsoError(e.to_string()))?;
    let mut bytes = out.into_inner();
    // Whole 2048-byte sectors, as block devices and `blkid` expect.
    bytes.resize(bytes.len().div_ceil(2048) * 2048, 0);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use hadris_iso::read::IsoImage;

    use super::*;

    fn read(iso: &[u8], name: &str) -> Option<Vec<u8>> {
        let image = IsoImage::open(Cursor::new(iso.to_vec())).unwrap();
        let entry = image.find_path(name).unwrap()?;
        Some(image.read_file(&entry).unwrap())
    }

    #[test]
    fn seed_reads_back_byte_for_byte() {
        let seed = Seed {
            user_data: b"#cloud-config\nwrite_files:\n- path: /etc/x\n  content: \"\xc3\xa9\"\n"
                .to_vec(),
            meta_data: "instance-id: 3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f\nlocal-hostname: m1\n"
                .into(),
            network_config: "version: 2\nethernets: {}\n".into(),
            vendor_data: None,
        };
        let iso = build(&seed).unwrap();
        assert_eq!(iso.len() % 2048, 0);
        // Volume label at sector 16, bytes 40..72, lower-case kept.
        let label = String::from_utf8_lossy(&iso[16 * 2048 + 40..16 * 2048 + 72])
            .trim_end()
            .to_string();
        assert_eq!(label, "cidata");
        assert_eq!(read(&iso, "user-data").unwrap(), seed.user_data);
        assert_eq!(read(&iso, "meta-data").unwrap(), seed.meta_data.as_bytes());
        assert_eq!(
            read(&iso, "network-config").unwrap(),
            seed.network_config.as_bytes()
        );
        assert_eq!(read(&iso, "vendor-data"), None);
        let with_vendor = Seed {
            vendor_data: Some("#cloud-config\n{}\n".into()),
            ..seed
        };
        let iso = build(&with_vendor).unwrap();
        assert_eq!(
            read(&iso, "vendor-data").unwrap(),
            b"#cloud-config\n{}\n".to_vec()
        );
    }

    #[test]
    fn large_user_data_fits() {
        let seed = Seed {
            user_data: vec![b'a'; 200_000],
            meta_data: "instance-id: x\n".into(),
            network_config: "version: 2\n".into(),
            vendor_data: None,
        };
        let iso = build(&seed).unwrap();
        assert_eq!(read(&iso, "user-data").unwrap().len(), 200_000);
    }
}
