//! A thread's position (`fi_xpu_host_item`) and the launch it runs a work
//! item of. A thread outside any launch is a work item of its own.
use super::team::Launch;
use fi_xpu_abi::*;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

thread_local! {
    pub(super) static ITEM: Cell<fi_xpu_host_item> = const { Cell::new(fi_xpu_host_item::single()) };
    pub(super) static LAUNCH: RefCell<Option<Arc<Launch>>> = const { RefCell::new(None) };
}

/// The calling thread's position. The pointer stays valid for the life of
/// the thread, and the value does not change while a kernel runs.
pub fn current_item_ptr() -> *const fi_xpu_host_item {
    ITEM.with(|c| c.as_ptr().cast_const())
}

pub fn current_item() -> fi_xpu_host_item {
    ITEM.with(Cell::get)
}
