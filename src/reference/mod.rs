//! f64 truth on the CPU: the transforms every learned or fused result is checked against.
//!
//! - [`dft`]: the discrete Fourier transform and its inverse through rustfft, in numpy's three
//!   normalisations ([`FftNorm`]).
//! - [`targets`]: dense N×N matrices of the transforms the trainer fits (DFT, iDFT, DCT-II,
//!   DST-II, Hadamard, Hartley, circulant convolution), each built by a fast algorithm and
//!   tested against its closed form or a naive O(N²) sum.
//! - [`butterfly`]: the butterfly product evaluated in f64 from its twiddles, the definition
//!   that the tensor-op forward and the fused kernels are checked against.
//! - [`factorizations`]: exact factorizations of the targets into (permutation, butterfly)
//!   factors, in f64: which model class represents which target, and the floors.
//! - [`identify`]: the input permutation that makes a matrix a butterfly, found from the
//!   matrix's hierarchical rank-one structure (or shown not to exist).
//! - [`growth`]: a circulant layer of N/2 grown to N by the targets' eigenstructure, the start
//!   a grown circulant run polishes from.
//! - [`matrix`]: the small dense complex matrix type these share.
//! - [`user`]: a target a user brings as its matrix, in memory or from a `.npy` file.
//! - [`data`]: a target a user brings as input/output pairs, in memory or from `.npy` files.
//! - [`operator`]: a target a user brings as code that applies it ([`Operator`]), which every
//!   target implements.

pub(crate) mod arrays;
pub mod butterfly;
pub mod data;
pub mod dft;
pub mod factorizations;
pub mod growth;
pub mod identify;
pub mod matrix;
pub mod operator;
pub mod targets;
pub mod user;

pub use data::DataTarget;
pub use dft::FftNorm;
pub use matrix::ComplexMatrix;
pub use operator::{Operator, OperatorTarget};
pub use targets::{Target, TargetKind};
pub use user::MatrixTarget;
