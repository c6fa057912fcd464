//! `DTCAST_ISA=portable` (at build time) leaves the x86 module out, as on CPUs other than x86-64,
//! so that the portable kernels can be tested alone on an x86 machine. Only this crate and those
//! above it rebuild when it changes (`RUSTFLAGS='--cfg dtcast_isa="portable"'` does the same but
//! rebuilds every dependency).

fn main() {
    println!("cargo::rerun-if-env-changed=DTCAST_ISA");
    println!("cargo::rustc-check-cfg=cfg(dtcast_isa, values(\"portable\"))");
    match std::env::var("DTCAST_ISA").as_deref() {
        Ok("portable") => println!("cargo::rustc-cfg=dtcast_isa=\"portable\""),
        Ok("") | Err(_) => {}
        Ok(other) => panic!("DTCAST_ISA={other:?}: the accepted value is `portable` (or unset)"),
    }
}
