//! Tests of the reason codes, messages and terminal flags.

use super::*;

#[test]
fn codes_are_camel_case_words() {
    for r in [
        Reason::Paused,
        Reason::InvalidVmid {
            vmid: 42,
            found: "x".into(),
        },
        Reason::CloneFailed("x".into()),
        Reason::IpAddressPoolExhausted("x".into()),
    ] {
        let c = r.code();
        assert!(c.chars().next().is_some_and(|c| c.is_ascii_uppercase()));
        assert!(c.chars().all(|c| c.is_ascii_alphanumeric()), "{c}");
    }
}

#[test]
fn terminal_problems_need_a_change() {
    assert!(Reason::InvalidSpec("spec.memoryMiB: …".into()).terminal());
    assert!(
        Reason::InvalidVmid {
            vmid: 100,
            found: "a template".into()
        }
        .terminal()
    );
    assert!(!Reason::CloneFailed("lock timeout".into()).terminal());
    assert!(Reason::IsoStorageUnfit("local-lvm".into()).terminal());
    assert!(!Reason::NoIsoStorage("pve-b1".into()).terminal());
    assert!(
        !Reason::InstanceUnreachable {
            instance: "dc-a".into(),
            detail: "connection refused".into()
        }
        .terminal()
    );
    assert!(
        Reason::CredentialsNotReady {
            instance: "dc-a".into(),
            detail: "Secret wl1/pve-a not found".into()
        }
        .terminal()
    );
}

#[test]
fn messages_name_the_vmid_and_what_was_found() {
    let r = Reason::InvalidVmid {
        vmid: 9000,
        found: "VM 9000 is a template".into(),
    };
    assert_eq!(r.code(), "InvalidVMID");
    assert!(r.message().starts_with(
        "spec.virtualMachineID 9000 cannot be this machine's VM: VM 9000 is a template;"
    ));
}
