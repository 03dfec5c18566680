// Package sdk holds gotry under third-party SDKs.
package sdk
