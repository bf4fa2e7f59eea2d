//go:build !testhooks

package main

// testHooksBuilt tells the tests this binary has no test hooks.
const testHooksBuilt = false
