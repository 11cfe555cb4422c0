//! Relinks the binary when what its release link reads changes (link/cc.sh, which cargo does
//! not see: it is the linker).
fn main() {
    println!("cargo:rerun-if-changed=link/cc.sh");
    println!("cargo:rerun-if-changed=link/hot-functions.txt");
}
