//! Links the `flotilla` executable as position-dependent (`-no-pie`) on Linux.
//!
//! Why: the binary is about 200 MB, and as a position-independent executable it
//! carries 280,000 relative relocations. The loader applied them on every start,
//! writing (and so copying) the 4.7 MB of `.data.rel.ro` they point into: `flotilla
//! --version` took 5.9 ms, against 1.2 ms linked at a fixed address (packing the
//! relocations as RELR still took 4.0 ms). A CLI started per statement pays that each
//! time. The cost is that the executable's own code and data are not at a random
//! address (libraries, heap, stack and mappings still are); set FLOTILLA_PIE=1 when
//! building to keep a position-independent executable.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=FLOTILLA_PIE");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if linux && std::env::var_os("FLOTILLA_PIE").is_none() {
        println!("cargo:rustc-link-arg-bin=flotilla=-no-pie");
    }
}
