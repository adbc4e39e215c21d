module github.com/kbind/kbind/tools/testreport

go 1.26.0
