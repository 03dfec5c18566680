module github.com/MrVSiK/gotry/tools/vulndb

go 1.25
