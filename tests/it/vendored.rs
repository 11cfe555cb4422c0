//! The build uses the patched hyper in `vendor/hyper` (see its LOCKGATE.md), not a release
//! from crates.io. If `Cargo.lock` moved hyper to another version, Cargo would only warn that
//! the patch went unused, and the memory a waiting request costs would grow unnoticed.

#[test]
fn hyper_comes_from_vendor() {
    let root = env!("CARGO_MANIFEST_DIR");
    let lock = std::fs::read_to_string(format!("{root}/Cargo.lock")).expect("Cargo.lock");
    let vendored = std::fs::read_to_string(format!("{root}/vendor/hyper/Cargo.toml"))
        .expect("vendor/hyper/Cargo.toml");
    let vendored_version = vendored
        .lines()
        .find_map(|line| line.strip_prefix("version = "))
        .expect("a version in vendor/hyper/Cargo.toml");
    let hypers: Vec<&str> = lock
        .split("[[package]]")
        .filter(|package| package.trim_start().starts_with("name = \"hyper\"\n"))
        .collect();
    assert_eq!(hypers.len(), 1, "one hyper in Cargo.lock: {hypers:?}");
    assert!(
        hypers[0].contains(&format!("\nversion = {vendored_version}\n")),
        "Cargo.lock's hyper is not the vendored {vendored_version}: {}",
        hypers[0]
    );
    assert!(
        !hypers[0].contains("\nsource = "),
        "Cargo.lock takes hyper from a registry, not from vendor/hyper: {}",
        hypers[0]
    );
}
