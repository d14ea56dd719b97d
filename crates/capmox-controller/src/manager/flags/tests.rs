use super::*;

/// Asserts that each `flag value` is refused with a message holding
/// `says`.
fn assert_refused(cases: &[(&str, &str, &str)]) {
    for (flag, value, says) in cases {
        let e = Flags::try_parse_from(["capmox-controller", flag, value])
            .err()
            .unwrap_or_else(|| panic!("{flag} {value} was accepted"))
            .to_string();
        assert!(e.contains(says), "{flag} {value}: {e}");
    }
}

#[test]
fn bad_durations_are_refused_with_what_to_give() {
    assert_refused(&[
        ("--pve-timeout", "abc", "give a duration such as 60s"),
        ("--pve-timeout", "0s", "must be greater than 0"),
        ("--probe-period", "0s", "must be greater than 0"),
        ("--shutdown-timeout", "10", "give a duration such as 60s"),
    ]);
    let f = Flags::try_parse_from(["capmox-controller", "--pve-timeout", " 1m 30s "]).unwrap();
    assert_eq!(f.pve_timeout, Duration::from_secs(90));
}

#[test]
fn a_refused_value_names_the_flag_and_its_variable() {
    let refused = |args: &[&str]| {
        let e = Flags::try_parse_from(args).unwrap_err();
        name_the_variable(e).to_string()
    };
    let e = refused(&["capmox-controller", "--concurrency", "0"]);
    assert!(
        e.contains(
            "invalid value '0' for '--concurrency <CONCURRENCY> (or CAPMOX_CONCURRENCY)': must be at least 1"
        ),
        "{e}"
    );
    let e = refused(&["capmox-controller", "--log-format", "yaml"]);
    assert!(
        e.contains("'--log-format <LOG_FORMAT> (or CAPMOX_LOG_FORMAT)'"),
        "{e}"
    );
    // --kubeconfig has no variable; an unknown flag is left as it is.
    let e = refused(&["capmox-controller", "--kubeconfig"]);
    assert!(!e.contains("(or "), "{e}");
    let e = refused(&["capmox-controller", "--nope"]);
    assert!(e.contains("unexpected argument '--nope'"), "{e}");
}

#[test]
fn durations_above_their_bound_are_refused() {
    assert_refused(&[
        ("--probe-period", "25h", "must be at most 1 day;"),
        ("--probe-retry", "2days", "must be at most 1 day;"),
        ("--pve-timeout", "61m", "must be at most 1 hour;"),
        ("--shutdown-timeout", "100years", "must be at most 1 hour;"),
        ("--leader-lease-duration", "2h", "must be at most 1 hour;"),
    ]);
    let f = Flags::try_parse_from([
        "capmox-controller",
        "--probe-period=24h",
        "--pve-timeout=1h",
    ])
    .unwrap();
    assert_eq!(f.probe_period, Duration::from_secs(86_400));
    assert_eq!(f.pve_timeout, Duration::from_secs(3_600));
}

#[test]
fn names_and_label_values_are_checked() {
    let too_long = "a".repeat(64);
    assert_refused(&[
        (
            "--namespace",
            "Bad_NS!",
            "\"Bad_NS!\" is not a namespace name",
        ),
        ("--namespace", "a-", "is not a namespace name"),
        (
            "--leader-election-namespace",
            "a.b",
            "\"a.b\" is not a namespace name",
        ),
        ("--watch-filter", "a b,c", "\"a b,c\" is not a label value"),
        ("--watch-filter", "team-", "is not a label value"),
        (
            "--watch-filter",
            too_long.as_str(),
            "give at most 63 letters, digits, '-', '_' or '.'",
        ),
        (
            "--default-credentials-secret",
            "a/b/c",
            "\"a/b/c\" has 3 parts separated by '/'; give name or namespace/name",
        ),
        (
            "--default-credentials-secret",
            "NS/creds",
            "\"NS\" is not a namespace name",
        ),
        (
            "--leader-election-id",
            "A/B",
            "\"A/B\" is not a Lease name; give lowercase letters",
        ),
        ("--leader-election-id", "UPPER", "is not a Lease name"),
        ("--leader-election-id", "", "is not a Lease name"),
    ]);
    let f = Flags::try_parse_from([
        "capmox-controller",
        "--namespace=team-a1",
        "--watch-filter=Team_A.1",
        "--default-credentials-secret=capmox-system/pve.creds",
    ])
    .unwrap();
    assert_eq!(f.namespace.as_deref(), Some("team-a1"));
    assert_eq!(f.watch_filter.as_deref(), Some("Team_A.1"));
    assert_eq!(
        f.default_credentials(),
        Some(("capmox-system".to_string(), "pve.creds".to_string()))
    );
    // An empty watch filter (an empty environment variable) is "not set".
    let f = Flags::try_parse_from(["capmox-controller", "--watch-filter="]).unwrap();
    assert_eq!(f.controller_options().namespace, None);
    assert_eq!(f.controller_options().watch_filter, None);
}

#[test]
fn an_empty_namespace_is_refused_with_how_to_watch_all() {
    assert_refused(&[
        (
            "--namespace",
            "",
            "empty; give a namespace name, or leave out --namespace (and unset CAPMOX_NAMESPACE) to watch all namespaces",
        ),
        ("--namespace", " ", "empty; give a namespace name"),
        (
            "--leader-election-namespace",
            "",
            "empty; give a namespace name, or leave out --leader-election-namespace (and unset POD_NAMESPACE) to use the namespace default",
        ),
    ]);
}

#[test]
fn negative_and_garbled_durations_are_refused_in_words() {
    const FORM: &str = "give a duration such as 60s, 500ms, 2m or 1h30m";
    for (value, says) in [
        ("-5s", "must be greater than 0;"),
        (" -1m", "must be greater than 0;"),
        ("", "empty;"),
        ("5 fortnights", "\"fortnights\" is not a unit of time;"),
        ("10", "\"10\" has no unit;"),
        ("s", "\"s\" is not a duration;"),
        ("1,5s", "\"1,5s\" is not a duration;"),
        ("99999999999999999999s", "must be at most 1 day;"),
    ] {
        let e = parse_duration_up_to::<DAY>(value).unwrap_err();
        assert!(e.starts_with(says), "{value:?}: {e}");
        assert!(e.ends_with(FORM), "{value:?}: {e}");
        assert!(
            !e.contains("expected number at") && !e.contains("character at"),
            "humantime's offset: {value:?}: {e}"
        );
    }
    for arg in ["--probe-period=-5s", "--pve-timeout=-1s"] {
        let e = Flags::try_parse_from(["capmox-controller", arg])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("must be greater than 0; give a duration such as 60s, 500ms, 2m or 1h30m"),
            "{arg}: {e}"
        );
    }
    let f = Flags::try_parse_from(["capmox-controller", "--probe-period=1h30m"]).unwrap();
    assert_eq!(f.probe_period, Duration::from_secs(5400));
}

#[test]
fn boolean_variables_take_the_usual_words() {
    for yes in ["true", "1", "yes", "on", "TRUE", "Yes", " on "] {
        assert_eq!(parse_boolish(yes), Ok(true), "{yes}");
    }
    for no in ["false", "0", "no", "off", "False", "OFF"] {
        assert_eq!(parse_boolish(no), Ok(false), "{no}");
    }
    for bad in ["", "maybe", "2", "enabled"] {
        let e = parse_boolish(bad).unwrap_err();
        assert!(
            e.ends_with(
                "is not true or false; give true or false (also 1 or 0, yes or no, on or off)"
            ),
            "{bad:?}: {e}"
        );
    }
    // On the command line the boolean flags take no value, as before (their
    // variables: tests/it/manager_startup.rs).
    let f = Flags::try_parse_from(["capmox-controller", "--leader-elect", "--disable-webhooks"])
        .unwrap();
    assert!(f.leader_elect && f.disable_webhooks);
    assert!(Flags::try_parse_from(["capmox-controller", "--disable-webhooks=1"]).is_err());
}

#[test]
fn counts_below_one_are_refused_with_what_to_give() {
    assert_refused(&[
        ("--concurrency", "0", "must be at least 1"),
        ("--clone-concurrency", "0", "must be at least 1"),
        ("--concurrency", "1.5", "give a whole number such as 32"),
        ("--concurrency", "70000", "give a whole number such as 32"),
        (
            "--clone-concurrency",
            "many",
            "give a whole number such as 32",
        ),
    ]);
    let f = Flags::try_parse_from(["capmox-controller", "--concurrency", "1"]).unwrap();
    assert_eq!(f.controller_options().concurrency, 1);
    assert_eq!(f.machine_options().clone_concurrency, 128);
}

#[test]
fn a_bad_log_level_is_refused_with_what_to_give() {
    assert_refused(&[
        ("--log-level", "garbage[", "give a level (error, warn"),
        ("--log-level", "LOUD", "\"LOUD\" is not a level"),
    ]);
    for ok in ["debug", "WARN", "info,capmox_controller=debug,kube=warn"] {
        let f = Flags::try_parse_from(["capmox-controller", "--log-level", ok]).unwrap();
        assert_eq!(f.log_level, ok);
    }
}

#[test]
fn leader_timings_must_nest() {
    let parse = |args: &[&str]| {
        let mut all = vec!["capmox-controller"];
        all.extend_from_slice(args);
        Flags::try_parse_from(all).unwrap().check()
    };
    assert_eq!(parse(&[]), Ok(()));
    let e = parse(&["--leader-renew-deadline", "20s"]).unwrap_err();
    assert!(
        e.contains("--leader-renew-deadline (20s) must be shorter than --leader-lease-duration"),
        "{e}"
    );
    let e = parse(&["--leader-retry-period", "10s"]).unwrap_err();
    assert!(
        e.contains(
            "--leader-retry-period (10s) must be shorter than --leader-renew-deadline (10s)"
        ),
        "{e}"
    );
}

#[test]
fn listen_addresses_take_ip_and_port_or_port_alone() {
    let f = Flags::try_parse_from([
        "capmox-controller",
        "--metrics-addr=:18080",
        "--health-addr=127.0.0.1:18081",
        "--webhook-addr=[::1]:19443",
    ])
    .unwrap();
    assert_eq!(f.metrics_addr, "0.0.0.0:18080".parse().unwrap());
    assert_eq!(f.health_addr, "127.0.0.1:18081".parse().unwrap());
    assert_eq!(f.webhook_addr, "[::1]:19443".parse().unwrap());
    assert_refused(&[
        (
            "--metrics-addr",
            "localhost:8080",
            "\"localhost:8080\" is not a listen address; give IP:port",
        ),
        ("--health-addr", ":http", "is not a listen address"),
        ("--webhook-addr", "9443", "is not a listen address"),
    ]);
}

#[test]
fn listen_addresses_may_not_take_the_same_port() {
    let check = |args: &[&str]| {
        let mut all = vec!["capmox-controller"];
        all.extend_from_slice(args);
        Flags::try_parse_from(all).unwrap().check()
    };
    assert_eq!(
        check(&["--webhook-addr=0.0.0.0:8080"]),
        Err("--metrics-addr (0.0.0.0:8080) and --webhook-addr (0.0.0.0:8080) take the same port; give them different ports".to_string())
    );
    assert_eq!(
        check(&["--health-addr=127.0.0.1:8080"]),
        Err("--metrics-addr (0.0.0.0:8080) and --health-addr (127.0.0.1:8080) take the same port; give them different ports".to_string())
    );
    // Equal metrics and health addresses share one listener; port 0
    // is a free port each; a disabled webhook server listens nowhere.
    assert_eq!(check(&["--health-addr=0.0.0.0:8080"]), Ok(()));
    assert_eq!(
        check(&[
            "--metrics-addr=127.0.0.1:0",
            "--health-addr=127.0.0.1:0",
            "--webhook-addr=127.0.0.1:0"
        ]),
        Ok(())
    );
    assert_eq!(
        check(&["--webhook-addr=0.0.0.0:8081", "--disable-webhooks"]),
        Ok(())
    );
    assert_eq!(
        check(&[
            "--metrics-addr=127.0.0.1:8080",
            "--health-addr=127.0.0.2:8080"
        ]),
        Ok(())
    );
}

#[test]
fn defaults_and_overrides() {
    let f = Flags::try_parse_from(["capmox-controller"]).unwrap();
    assert_eq!(f.metrics_addr, "0.0.0.0:8080".parse().unwrap());
    assert_eq!(f.health_addr, "0.0.0.0:8081".parse().unwrap());
    assert!(!f.leader_elect);
    assert_eq!(f.log_format, LogFormat::Text);
    let o = f.controller_options();
    assert_eq!(o.namespace, None);
    assert_eq!(o.concurrency, 32);
    assert_eq!(o.probe_period, Duration::from_secs(60));
    assert_eq!(o.probe_timeout, Duration::from_secs(10));
    assert_eq!(o.pve_call_timeout, Duration::from_secs(60));
    assert_eq!(f.machine_options().clone_concurrency, 128);
    let w = f.webhook_options().unwrap();
    assert_eq!(w.addr, "0.0.0.0:9443".parse().unwrap());
    assert_eq!(
        w.cert_dir,
        PathBuf::from("/tmp/k8s-webhook-server/serving-certs")
    );
    assert_eq!(
        (w.cert_name.as_str(), w.key_name.as_str()),
        ("tls.crt", "tls.key")
    );
    assert_eq!(w.reload_period, Duration::from_secs(10));

    let f = Flags::try_parse_from([
        "capmox-controller",
        "--namespace=wl",
        "--watch-filter=team-a",
        "--concurrency=1",
        "--leader-elect",
        "--leader-election-namespace=capmox-system",
        "--log-format=json",
        "--default-credentials-secret=capmox-default-credentials",
        "--time-scale=0.01",
        "--probe-period=30s",
        "--probe-timeout=500ms",
    ])
    .unwrap();
    let o = f.controller_options();
    assert_eq!(o.namespace.as_deref(), Some("wl"));
    assert_eq!(o.watch_filter.as_deref(), Some("team-a"));
    assert_eq!(o.concurrency, 1);
    assert_eq!(o.time_scale, 0.01);
    assert_eq!(o.probe_period, Duration::from_secs(30));
    assert_eq!(o.probe_timeout, Duration::from_millis(500));
    assert_eq!(f.log_format, LogFormat::Json);
    assert_eq!(
        f.default_credentials(),
        Some((
            "capmox-system".to_string(),
            "capmox-default-credentials".to_string()
        ))
    );
    let f = Flags::try_parse_from([
        "capmox-controller",
        "--default-credentials-secret=other/creds",
    ])
    .unwrap();
    assert_eq!(
        f.default_credentials(),
        Some(("other".to_string(), "creds".to_string()))
    );
    assert!(Flags::try_parse_from(["capmox-controller", "--log-format=yaml"]).is_err());
    for bad in ["0", "-1", "inf", "1e300", "100.5"] {
        let e = parse_time_scale(bad).unwrap_err();
        assert!(
            e.starts_with("out of range; give a number greater than 0"),
            "{bad}: {e}"
        );
        let arg = format!("--time-scale={bad}");
        assert!(
            Flags::try_parse_from(["capmox-controller", arg.as_str()]).is_err(),
            "{bad}"
        );
    }
    // `--time-scale -1` (a separate value) gets the range, not
    // "unexpected argument".
    let e = Flags::try_parse_from(["capmox-controller", "--time-scale", "-1"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("out of range; give a number greater than 0"),
        "{e}"
    );
    for bad in ["abc", "NaN"] {
        let e = parse_time_scale(bad).unwrap_err();
        assert!(e.starts_with("not a number;"), "{bad}: {e}");
    }
    for empty in ["", " "] {
        let e = parse_time_scale(empty).unwrap_err();
        assert!(e.starts_with("empty;"), "{empty:?}: {e}");
        assert!(e.contains("CAPMOX_TIME_SCALE"), "{e}");
    }
    // The help names the bound as a number, not as a rustdoc link.
    let help = <Flags as clap::CommandFactory>::command()
        .render_long_help()
        .to_string();
    assert!(
        help.contains(&format!("at most {MAX_TIME_SCALE}")) && !help.contains("`MAX_TIME_SCALE`"),
        "{help}"
    );
    assert_eq!(parse_time_scale("100"), Ok(100.0));
    assert_eq!(parse_time_scale("0.005"), Ok(0.005));
    let f = Flags::try_parse_from([
        "capmox-controller",
        "--webhook-addr=127.0.0.1:0",
        "--webhook-cert-dir=/certs",
        "--webhook-cert-name=a.pem",
        "--webhook-key-name=b.pem",
    ])
    .unwrap();
    let w = f.webhook_options().unwrap();
    assert_eq!(w.addr, "127.0.0.1:0".parse().unwrap());
    assert_eq!(w.cert_dir, PathBuf::from("/certs"));
    assert_eq!(
        (w.cert_name.as_str(), w.key_name.as_str()),
        ("a.pem", "b.pem")
    );
    let f = Flags::try_parse_from(["capmox-controller", "--disable-webhooks"]).unwrap();
    assert_eq!(f.webhook_options(), None);
}
