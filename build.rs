//! The suite's files are built into the binary (`src/bundled.rs`): rebuild when any of them
//! changes, or a file is added or removed.

fn main() {
    for dir in ["features", "fixtures", "schemas"] {
        println!("cargo:rerun-if-changed={dir}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
