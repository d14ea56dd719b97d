//! Ctrl-C stops the demo cleanly, and its exit status says it was
//! interrupted (130, as a shell reports a process ended by SIGINT), not
//! that it ran to its end; the controller's log is kept in a file of the
//! run's own. The signal is sent at the demo's first line,
//! before its environment starts: a SIGINT listener made only once the
//! environment was up let such an early Ctrl-C kill the demo (leaving its
//! controller running) or be swallowed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn an_interrupted_demo_exits_130_after_stopping_everything() {
    stops_everything_on("INT", 130);
}

/// `kill` (SIGTERM) and a closed terminal (SIGHUP) stop it as Ctrl-C does:
/// before, they ended the demo at once and left its controller running and
/// its working directory behind.
#[test]
fn a_terminated_demo_exits_143_after_stopping_everything() {
    stops_everything_on("TERM", 143);
}

#[test]
fn a_hung_up_demo_exits_129_after_stopping_everything() {
    stops_everything_on("HUP", 129);
}

fn stops_everything_on(signal: &str, code: i32) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--timeout-secs", "600"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run the demo binary");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("capmox demo:") {
                let _ = tx.send(());
            }
            seen.push(line);
        }
        seen
    });
    if rx.recv_timeout(Duration::from_secs(60)).is_err() {
        let _ = child.kill();
        panic!("the demo printed nothing: {:?}", reader.join());
    }
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let until = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the demo") {
            break s;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("the demo did not stop within 180 s of SIG{signal}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let lines = reader.join().expect("read the demo's output");
    assert_eq!(status.code(), Some(code), "{lines:?}");
    // The log is kept in a file of this run's own.
    let kept = std::env::temp_dir().join(format!("capmox-demo-controller-{}.log", child.id()));
    let last = lines
        .iter()
        .find(|l| l.starts_with("interrupted: the simulated datacenters"))
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert!(
        last.ends_with(&format!(
            "the controller's log is kept in {}.",
            kept.display()
        )),
        "{last}"
    );
    // The first lines name it too: the log in the working directory,
    // named beside it, is removed with that directory.
    let first = lines
        .iter()
        .find(|l| l.starts_with("controller log:"))
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert!(
        first.ends_with(&format!(
            "capmox-controller.log while the demo runs; kept in {} when it ends",
            kept.display()
        )),
        "{first}"
    );
    assert!(kept.is_file(), "{}", kept.display());
    std::fs::remove_file(&kept).unwrap();
}
