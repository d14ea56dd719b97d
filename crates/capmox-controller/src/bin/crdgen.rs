//! `crdgen`: prints the provider's CRDs as YAML, or writes one file per CRD.
//!
//! `crdgen` prints all CRDs as one multi-document stream; `crdgen --out-dir DIR`
//! writes `DIR/<group>_<plural>.yaml` (what `make generate` commits under
//! `config/crd/bases/`).

use std::path::PathBuf;
use std::process::ExitCode;

use capmox_controller::api::crd;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out_dir = match args.as_slice() {
        [] => None,
        [flag, dir] if flag == "--out-dir" => Some(PathBuf::from(dir)),
        _ => {
            eprintln!("usage: crdgen [--out-dir DIR]");
            return ExitCode::from(2);
        }
    };
    for c in crd::all() {
        let yaml = match crd::to_yaml(&c) {
            Ok(y) => y,
            Err(e) => {
                eprintln!("crdgen: cannot serialise CRD {}: {e}", c.spec.names.kind);
                return ExitCode::FAILURE;
            }
        };
        match &out_dir {
            None => print!("{yaml}"),
            Some(dir) => {
                let path = dir.join(crd::file_name(&c));
                if let Err(e) =
                    std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, yaml))
                {
                    eprintln!("crdgen: cannot write {}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
                eprintln!("wrote {}", path.display());
            }
        }
    }
    ExitCode::SUCCESS
}
