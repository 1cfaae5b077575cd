package optimize

// Split is split, for the tests of package optimize_test.
var Split = split
