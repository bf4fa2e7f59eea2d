//go:build testhooks

package main

// testHooksBuilt tells the tests this binary has its test hooks.
const testHooksBuilt = true
